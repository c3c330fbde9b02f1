// acw's API alone, as the `serve` of a deployment with separate workers runs it (the HTTP entry
// point's scenarios, bench/README.md#http-entry-point).

/** A `serve` child: acw default config with the API and jobs off (`extra`: more of the worker's options). Returns it and its URL. */
export async function startServe(ctx, url, name, extra = {}) {
  const c = ctx.workerChild(
    {
      system: 'acw',
      variant: 'default',
      mode: 'deliver',
      url,
      receiverUrl: ctx.receiver.url,
      target: Infinity,
      http: true,
      jobs: false,
      ...extra,
    },
    name,
  );
  await c.wait('loaded', 60_000);
  c.send({ cmd: 'go' });
  const { httpUrl } = await c.wait('started', 60_000);
  return { c, httpUrl };
}
