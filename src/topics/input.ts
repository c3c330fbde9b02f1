import { z } from 'zod';
import { VALIDATION_MODES } from '../config/schema.js';
import { topicField } from '../notify/input.js';

/**
 * What the topics API and CLI accept (docs/operations.md#topic-catalog). The schema is a JSON
 * object here; whether it compiles, and whether each example matches it, is checked where it is
 * written (src/topics/validate.ts), naming the field.
 */

const schema = z.record(z.string(), z.unknown()).describe("JSON Schema (draft 2020-12) of the event's data");
const examples = z.array(z.unknown()).min(1).max(20).describe('example values of data, each matching the schema');
const description = z.string().max(2000).describe('what the event means, for the receivers');
const note = z.string().max(500).describe('what to use instead, shown with the warning');
const validation = z.enum(VALIDATION_MODES).describe("this topic's validation mode (null or absent: topics.validation)");

export const createTopicInput = z.strictObject({
  name: topicField,
  description: description.optional(),
  schema,
  examples,
  deprecated: z.boolean().optional(),
  deprecation_note: note.optional(),
  validation: validation.nullable().optional(),
});
export type CreateTopicInput = z.infer<typeof createTopicInput>;

export const updateTopicInput = z.strictObject({
  description: description.optional(),
  deprecated: z.boolean().optional(),
  deprecation_note: note.optional(),
  archived: z.boolean().optional(),
  validation: validation.nullable().optional(),
});
export type UpdateTopicInput = z.infer<typeof updateTopicInput>;

export const addVersionInput = z.strictObject({ schema, examples });
export type AddVersionInput = z.infer<typeof addVersionInput>;

export const topicParams = z.strictObject({ name: z.string().max(200) });
