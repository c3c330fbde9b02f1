// A local OTLP/HTTP trace receiver on 127.0.0.1 for the tracing tests: it keeps every export the
// SDK posts, in JSON (http/json) or protobuf (http/protobuf), as one normalised list of spans. The
// protobuf is read by the small wire-format reader below (varints, fixed 32/64-bit and
// length-delimited fields, with the field numbers of opentelemetry/proto/trace/v1/trace.proto):
// the exporters 0.223 serialise by hand and bring no protobuf decoder.
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';

export type AttrValue = string | number | boolean;

export interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  /** 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  kind: number;
  attributes: Record<string, AttrValue>;
  links: Array<{ traceId: string; spanId: string }>;
  /** 0 unset, 1 ok, 2 error. */
  status: number;
  resource: Record<string, AttrValue>;
}

export interface OtlpReceiver {
  url: string;
  spans: OtlpSpan[];
  /** Every export body as received (protobuf as latin1 text), to look for what must not be there. */
  raw: string[];
  contentTypes: string[];
  close(): Promise<void>;
}

type Field = { no: number; wire: number; bytes?: Buffer; num?: bigint };

function varint(buf: Buffer, pos: number): [bigint, number] {
  let v = 0n;
  let shift = 0n;
  for (;;) {
    const b = buf[pos++]!;
    v |= BigInt(b & 0x7f) << shift;
    if ((b & 0x80) === 0) return [v, pos];
    shift += 7n;
  }
}

function fields(buf: Buffer): Field[] {
  const out: Field[] = [];
  let pos = 0;
  while (pos < buf.length) {
    const [key, p] = varint(buf, pos);
    pos = p;
    const no = Number(key >> 3n);
    const wire = Number(key & 7n);
    if (wire === 0) {
      const [v, q] = varint(buf, pos);
      out.push({ no, wire, num: v });
      pos = q;
    } else if (wire === 1) {
      out.push({ no, wire, bytes: buf.subarray(pos, pos + 8) });
      pos += 8;
    } else if (wire === 5) {
      out.push({ no, wire, bytes: buf.subarray(pos, pos + 4) });
      pos += 4;
    } else if (wire === 2) {
      const [len, q] = varint(buf, pos);
      out.push({ no, wire, bytes: buf.subarray(q, q + Number(len)) });
      pos = q + Number(len);
    } else throw new Error(`protobuf: wire type ${wire} not expected`);
  }
  return out;
}

const sub = (fs: Field[], no: number): Buffer[] => fs.filter((f) => f.no === no && f.bytes).map((f) => f.bytes!);
const str = (fs: Field[], no: number): string => sub(fs, no)[0]?.toString('utf8') ?? '';
const hex = (fs: Field[], no: number): string => sub(fs, no)[0]?.toString('hex') ?? '';
const num = (fs: Field[], no: number): number => Number(fs.find((f) => f.no === no)?.num ?? 0n);

function protoAttrs(list: Buffer[]): Record<string, AttrValue> {
  const out: Record<string, AttrValue> = {};
  for (const kv of list) {
    const f = fields(kv);
    const v = fields(sub(f, 2)[0] ?? Buffer.alloc(0));
    const x = v[0];
    if (!x) continue;
    out[str(f, 1)] =
      x.no === 1
        ? x.bytes!.toString('utf8')
        : x.no === 2
          ? x.num === 1n
          : x.no === 3
            ? Number(BigInt.asIntN(64, x.num!))
            : x.bytes!.readDoubleLE(0);
  }
  return out;
}

function fromProtobuf(body: Buffer): OtlpSpan[] {
  const spans: OtlpSpan[] = [];
  for (const rs of sub(fields(body), 1)) {
    const rsf = fields(rs);
    const resource = protoAttrs(sub(fields(sub(rsf, 1)[0] ?? Buffer.alloc(0)), 1));
    for (const ss of sub(rsf, 2)) {
      for (const sp of sub(fields(ss), 2)) {
        const f = fields(sp);
        spans.push({
          traceId: hex(f, 1),
          spanId: hex(f, 2),
          parentSpanId: hex(f, 4),
          name: str(f, 5),
          kind: num(f, 6),
          attributes: protoAttrs(sub(f, 9)),
          links: sub(f, 13).map((l) => {
            const lf = fields(l);
            return { traceId: hex(lf, 1), spanId: hex(lf, 2) };
          }),
          status: num(fields(sub(f, 15)[0] ?? Buffer.alloc(0)), 3),
          resource,
        });
      }
    }
  }
  return spans;
}

type JsonKv = { key: string; value: Record<string, unknown> };

function jsonAttrs(list: JsonKv[] | undefined): Record<string, AttrValue> {
  const out: Record<string, AttrValue> = {};
  for (const { key, value } of list ?? []) {
    if ('stringValue' in value) out[key] = String(value['stringValue']);
    else if ('intValue' in value) out[key] = Number(value['intValue']);
    else if ('boolValue' in value) out[key] = Boolean(value['boolValue']);
    else if ('doubleValue' in value) out[key] = Number(value['doubleValue']);
  }
  return out;
}

interface JsonExport {
  resourceSpans: Array<{
    resource?: { attributes?: JsonKv[] };
    scopeSpans: Array<{
      spans: Array<{
        traceId: string;
        spanId: string;
        parentSpanId?: string;
        name: string;
        kind: number;
        attributes?: JsonKv[];
        links?: Array<{ traceId: string; spanId: string }>;
        status?: { code?: number };
      }>;
    }>;
  }>;
}

function fromJson(body: Buffer): OtlpSpan[] {
  const doc = JSON.parse(body.toString('utf8')) as JsonExport;
  return doc.resourceSpans.flatMap((rs) =>
    rs.scopeSpans.flatMap((ss) =>
      ss.spans.map((s) => ({
        traceId: s.traceId,
        spanId: s.spanId,
        parentSpanId: s.parentSpanId ?? '',
        name: s.name,
        kind: s.kind,
        attributes: jsonAttrs(s.attributes),
        links: (s.links ?? []).map((l) => ({ traceId: l.traceId, spanId: l.spanId })),
        status: s.status?.code ?? 0,
        resource: jsonAttrs(rs.resource?.attributes),
      })),
    ),
  );
}

async function bodyOf(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: OtlpSpan[] = [];
  const raw: string[] = [];
  const contentTypes: string[] = [];
  const server = createServer((req, res) => {
    void bodyOf(req).then((body) => {
      const type = req.headers['content-type'] ?? '';
      contentTypes.push(type);
      raw.push(body.toString('latin1'));
      spans.push(...(type.includes('json') ? fromJson(body) : fromProtobuf(body)));
      res.writeHead(200, { 'content-type': type.includes('json') ? 'application/json' : 'application/x-protobuf' });
      res.end(type.includes('json') ? '{}' : '');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    raw,
    contentTypes,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
