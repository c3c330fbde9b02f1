/** The topic catalog's answers (docs/operations.md#topic-catalog). */
import { z } from 'zod';
import { VALIDATION_MODES } from '../../config/schema.js';

const instant = z.iso.datetime();
const jsonObject = z.record(z.string(), z.unknown());

export const topicVersionAnswer = z.object({
  version: z.int(),
  schema: jsonObject.describe('JSON Schema (draft 2020-12) of the data'),
  examples: z.array(z.unknown()),
  created_by: z.string(),
  created_at: instant,
});

export const topicAnswer = z.object({
  name: z.string(),
  description: z.string(),
  deprecated: z.boolean(),
  deprecation_note: z.string(),
  archived: z.boolean().describe('no longer offered; kept because events refer to it'),
  validation: z.enum(VALIDATION_MODES).nullable().describe("this topic's own mode; null: topics.validation"),
  effective_validation: z.enum(VALIDATION_MODES).describe('the mode that applies to its events'),
  source: z.enum(['config', 'api']).describe('config: declared in topics.catalog (edit the file); api: through /v1/topics'),
  created_at: instant,
  updated_at: instant,
  version: z.int().nullable().describe('the latest schema version: new events are validated against it'),
  versions: z.array(topicVersionAnswer).describe('oldest first; a version is never edited'),
  endpoints: z.array(z.string()).describe('the endpoints whose whitelist matches it'),
});

export const topicList = z.object({ items: z.array(topicAnswer) });
