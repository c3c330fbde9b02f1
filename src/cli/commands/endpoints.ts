import type { Command } from 'commander';
import { lazy, type CliRun } from '../lazy.js';

const actions = () => import('../actions/endpoints.js');

/**
 * `endpoints list|pause|resume`: the same view and the same actions as `GET /v1/endpoints` and
 * `POST /v1/endpoints/:name/pause|resume`, audited as the OS user (`cli:NAME`).
 */
export function registerEndpoints(program: Command, run: CliRun): void {
  const endpoints = program.command('endpoints').description('endpoints: their state and health; pause and resume');
  endpoints
    .command('list')
    .description('each endpoint: circuit, paused, held jobs, rate limit and recent health; a table on a terminal, JSON lines otherwise')
    .option('--window-minutes <n>', 'health over this many minutes, 1 to 10080', '60')
    .option('--json', 'JSON lines even on a terminal (they are the output whenever stdout is not one)')
    .option('-c, --config <file>', 'config file')
    .action(lazy(run, actions, 'endpointsList'));
  for (const [action, fn, help] of [
    ['pause', 'endpointsPause', 'pause an endpoint: no process delivers to it until resumed; its jobs wait, pending'],
    ['resume', 'endpointsResume', 'resume a paused endpoint; an open circuit is probed at once'],
  ] as const) {
    endpoints
      .command(action)
      .description(`${help} (prints its view, with "changed": false if there was nothing to do)`)
      .argument('<name>', 'endpoint name')
      .option('-c, --config <file>', 'config file')
      .action(lazy(run, actions, fn));
  }
  registerStoredEndpoints(endpoints, run);
}

function withEndpointFlags(cmd: Command): Command {
  return cmd
    .option('--url <url>', 'http(s) URL the POST goes to')
    .option('--topics <list>', 'comma-separated whitelist: exact topics, "prefix.*" or "*"')
    .option('--scheme <scheme>', 'acw (X-ACW-* headers) or standard (Standard Webhooks)')
    .option('--ordering <ordering>', 'keyed events after a dead head: relaxed (the next goes) or strict (the key waits for an operator)')
    .option('--propagate-trace', 'with tracing on, send traceparent/tracestate with each POST')
    .option('--no-propagate-trace', 'never send them')
    .option('--propagate-trace-default', 'follow notify.webhook.propagate_trace (clears the two above)')
    .option('--header <name=value>', 'an extra request header (repeatable)', (v: string, prev: string[] = []) => [...prev, v])
    .option('--timeout <duration>', 'per-attempt timeout, 100ms to 60s')
    .option('--max-in-flight <n>', 'concurrent deliveries per process')
    .option('--rate-limit <rate>', '"20/s" or "600/min" across all processes ("none" clears it)')
    .option('--description <text>', 'what it is for')
    .option('-c, --config <file>', 'config file');
}

/** `endpoints add|show|update|remove`: the endpoints API's create, read, change and delete, from the shell. */
function registerStoredEndpoints(endpoints: Command, run: CliRun): void {
  withEndpointFlags(
    endpoints
      .command('add')
      .description('create an endpoint (stored in the database, live in every process within a second); prints it with its secret, once')
      .argument('<name>', 'endpoint name'),
  )
    .option('--secret-file <file>', 'use the signing secret in this file (its first line) instead of a generated one')
    .option('--secret <secret>', 'the same on the command line, where ps shows it (warned about): prefer --secret-file')
    .option('--disabled', 'create it disabled (its jobs wait)')
    .action(lazy(run, actions, 'endpointsAdd'));

  endpoints
    .command('show')
    .description("one endpoint's view: definition, circuit, pause, held jobs and recent health (never its secret)")
    .argument('<name>', 'endpoint name')
    .option('-c, --config <file>', 'config file')
    .action(lazy(run, actions, 'endpointsShow'));

  withEndpointFlags(
    endpoints
      .command('update')
      .description('change a stored endpoint (config endpoints: edit the file)')
      .argument('<name>', 'endpoint name'),
  )
    .option('--disabled', 'disable it (its jobs wait)')
    .option('--enabled', 'enable it')
    .action(lazy(run, actions, 'endpointsUpdate'));

  endpoints
    .command('rotate-secret')
    .description('give a stored endpoint a new secret; the old one keeps signing beside it for the overlap (prints the new one, once)')
    .argument('<name>', 'endpoint name')
    .option('--overlap <duration>', 'how long both secrets sign, 1m to 720h', '24h')
    .option('--secret-file <file>', 'use the secret in this file (its first line) instead of a generated one')
    .option('--secret <secret>', 'the same on the command line, where ps shows it (warned about): prefer --secret-file')
    .option('-c, --config <file>', 'config file')
    .action(lazy(run, actions, 'endpointsRotateSecret'));

  endpoints
    .command('remove')
    .description('delete a stored endpoint; refused while it has pending jobs unless --force, which cancels them')
    .argument('<name>', 'endpoint name')
    .option('--force', 'cancel its pending jobs')
    .option('-c, --config <file>', 'config file')
    .action(lazy(run, actions, 'endpointsRemove'));
}

/**
 * `endpoints replay NAME --since 2h [--until T] [--status dead|all] [--dry-run]`: the same as
 * `POST /v1/endpoints/:name/replay` (docs/operations.md#replaying-an-endpoint).
 */
export function registerEndpointReplay(program: Command, run: CliRun): void {
  const endpoints = program.commands.find((c) => c.name() === 'endpoints') ?? program.command('endpoints');
  endpoints
    .command('replay')
    .description("send an endpoint's window again: its dead (or all finished) jobs re-queued, same ids; events it has no job for get one")
    .argument('<name>', 'endpoint name')
    .requiredOption('--since <time>', 'start of the window: a duration ago ("2h") or an RFC 3339 time')
    .option('--until <time>', 'end of the window (default now): a duration ago or an RFC 3339 time')
    .option('--status <status>', 'dead: dead jobs only (default); all: completed ones too')
    .option('--dry-run', 'print the counts; change nothing')
    .option('--idempotency-key <key>', 'the same key again (within 24 h) prints the first answer and changes nothing')
    .option('-c, --config <file>', 'config file')
    .action(lazy(run, actions, 'endpointsReplay'));
}
