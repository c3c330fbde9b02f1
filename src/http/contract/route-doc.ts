import type { z } from 'zod';
import type { Role } from '../../roles.js';

/** One answer of a route: what it means, and its body's schema. */
export interface Answer {
  description: string;
  /** The JSON body; absent with `contentType` (text, HTML, a stream) or for a 204. */
  schema?: z.ZodType;
  contentType?: string;
  headers?: Record<string, string>;
}

export interface RouteDoc {
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE';
  /** Fastify's path, `:name` parameters and a trailing `*` included. */
  url: string;
  summary: string;
  /** Who may call it; absent: public (no token). `any`: every authenticated user. */
  access?: readonly Role[] | 'any';
  /** `serve` only, or on `worker` too. */
  worker?: boolean;
  params?: z.ZodType;
  /** Absent on a /v1 route: it takes none, and any given is a 400 naming it. */
  query?: z.ZodType;
  body?: z.ZodType;
  /** A request without a body is read as `{}` (the body's own checks then name what is missing). */
  noBodyIsEmpty?: true;
  /** Request headers it reads, by their documented name. */
  headers?: Record<string, { description: string; schema: z.ZodType }>;
  /** Each success status (and any other answer of its own) with what it answers. */
  answers: Record<number, Answer>;
  /** The route's own refusals beyond the common ones: status and what it means here. */
  errors?: Record<number, string>;
}

/** A JSON answer. */
export const json = <S extends z.ZodType>(description: string, schema: S) => ({ description, schema });
