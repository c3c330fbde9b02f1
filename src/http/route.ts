import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { z } from 'zod';
import { OPERATIONS, type OperationId, type RouteDoc } from './contract/routes.js';
import { responseSchemas, serializerCompiler } from './contract/serializers.js';
import { emptyQuery, parse } from './schemas.js';

type Ops = typeof OPERATIONS;
type Part<R, K extends string> = R extends { [P in K]: infer S extends z.ZodType } ? z.output<S> : undefined;

/** What a route's handler gets: its request parts, checked by the registry's schemas. */
export interface Input<K extends OperationId> {
  params: Part<Ops[K], 'params'>;
  query: Part<Ops[K], 'query'> extends undefined ? Record<string, never> : Part<Ops[K], 'query'>;
  body: Part<Ops[K], 'body'>;
}

type Success = 200 | 201 | 202;
/** What a route's handler may return as its answer: one of its success schemas' shapes (or a reply it sent itself). */
export type Answer<K extends OperationId> = {
  [S in keyof Ops[K]['answers']]: S extends Success
    ? Ops[K]['answers'][S] extends { schema: infer A extends z.ZodType }
      ? z.input<A>
      : never
    : never;
}[keyof Ops[K]['answers']];

/** The shape of one answer of a route, for one sent with `reply.code(status).send(… satisfies AnswerAt<…>)`. */
export type AnswerAt<K extends OperationId, S extends keyof Ops[K]['answers']> = Ops[K]['answers'][S] extends {
  schema: infer A extends z.ZodType;
}
  ? z.input<A>
  : never;

export type Handler<K extends OperationId> = (
  input: Input<K>,
  req: FastifyRequest,
  reply: FastifyReply,
) => Promise<Answer<K> | FastifyReply>;

/**
 * Register the operation `id` of the registry (src/http/contract/routes.ts): its method and path,
 * who may call it (the auth hook reads `config.roles`), its answers' serializers (a field not in the
 * schema is not sent), and its request checked before the handler runs: path parameters, then the
 * query (on a /v1 route, none given means none taken: an unknown one is a 400), then the body.
 */
export function route<K extends OperationId>(app: FastifyInstance, id: K, handler: Handler<K>): void {
  const r: RouteDoc = OPERATIONS[id];
  const query = r.query ?? (r.url.startsWith('/v1/') ? emptyQuery : undefined);
  app.route({
    method: r.method,
    url: r.url,
    config: r.access ? { roles: r.access } : {},
    schema: { response: responseSchemas(id) },
    serializerCompiler,
    handler: async (req, reply) => {
      const input = {
        params: r.params ? parse(r.params, req.params, 'params') : undefined,
        query: query ? parse(query, req.query, 'query') : {},
        body: r.body ? parse(r.body, req.body === undefined && r.noBodyIsEmpty ? {} : req.body, 'body') : undefined,
      } as Input<K>;
      return handler(input, req, reply);
    },
  });
}
