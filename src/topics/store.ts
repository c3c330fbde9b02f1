/**
 * Writes to the topic catalog (docs/operations.md#topic-catalog): create, change, add a schema
 * version, each in one transaction with its audit row and a NOTIFY every process re-reads on. A
 * schema is compiled, and each example checked against it, before anything is written.
 */
import type pg from 'pg';
import { writeAudit } from '../admin/audit.js';
import type { Config } from '../config/index.js';
import { withTransaction, type Queryable } from '../db/pool.js';
import { ApiError } from '../errors.js';
import type { AddVersionInput, CreateTopicInput, UpdateTopicInput } from './input.js';
import { latest, readTopic, type Topic } from './rows.js';
import { compileChecked } from './validate.js';

export interface TopicStoreContext {
  pool: pg.Pool;
  /** NOTIFY channel every process re-reads the catalog on. */
  channel: string;
}

const notFound = (name: string): ApiError => new ApiError(404, 'not_found', `name: no topic ${name}`, { field: 'name' });

function configTopic(name: string): ApiError {
  return new ApiError(409, 'config_topic', `name: topic ${name} is declared in the config file (topics.catalog): edit the file`, {
    field: 'name',
  });
}

async function announce(client: Queryable, channel: string, name: string): Promise<void> {
  await client.query(`select pg_notify($1, $2)`, [channel, name]);
}

async function lock(client: Queryable, name: string): Promise<{ source: string } | undefined> {
  const res = await client.query<{ source: string }>(`select source from topics where name = $1 for update`, [name]);
  return res.rows[0];
}

async function insertVersion(client: Queryable, name: string, input: AddVersionInput, actor: string): Promise<number> {
  const res = await client.query<{ version: number }>(
    `insert into topic_versions (topic, version, schema, examples, created_by)
     select $1, coalesce(max(version), 0) + 1, $2::json, $3::json, $4 from topic_versions where topic = $1
     returning version`,
    [name, JSON.stringify(input.schema), JSON.stringify(input.examples), actor],
  );
  return res.rows[0]!.version;
}

/** Create a topic with its first schema version. */
export async function createTopic(ctx: TopicStoreContext, input: CreateTopicInput, actor: string): Promise<Topic> {
  compileChecked(input.schema, input.examples);
  return withTransaction(ctx.pool, async (client) => {
    const res = await client.query(
      `insert into topics (name, description, deprecated, deprecation_note, validation) values ($1, $2, $3, $4, $5)
       on conflict (name) do nothing returning name`,
      [input.name, input.description ?? '', input.deprecated ?? false, input.deprecation_note ?? '', input.validation ?? null],
    );
    if (res.rowCount === 0)
      throw new ApiError(409, 'conflict', `name: a topic named ${input.name} exists (archived ones too)`, { field: 'name' });
    const version = await insertVersion(client, input.name, input, actor);
    await writeAudit(client, {
      action: 'topic.created',
      actor,
      targetType: 'topic',
      targetId: input.name,
      details: { version, description: input.description ?? '', validation: input.validation ?? null },
    });
    await announce(client, ctx.channel, input.name);
    return (await readTopic(client, input.name))!;
  });
}

/** Change a topic's description, flags or mode; its schemas only through addTopicVersion. */
export async function updateTopic(ctx: TopicStoreContext, name: string, patch: UpdateTopicInput, actor: string): Promise<Topic> {
  return withTransaction(ctx.pool, async (client) => {
    const row = await lock(client, name);
    if (!row) throw notFound(name);
    if (row.source === 'config') throw configTopic(name);
    await client.query(
      `update topics set description = coalesce($2, description), deprecated = coalesce($3, deprecated),
         deprecation_note = coalesce($4, deprecation_note), archived = coalesce($5, archived),
         validation = case when $6 then $7 else validation end, updated_at = clock_timestamp()
       where name = $1`,
      [
        name,
        patch.description ?? null,
        patch.deprecated ?? null,
        patch.deprecation_note ?? null,
        patch.archived ?? null,
        patch.validation !== undefined,
        patch.validation ?? null,
      ],
    );
    await writeAudit(client, { action: 'topic.updated', actor, targetType: 'topic', targetId: name, details: { ...patch } });
    await announce(client, ctx.channel, name);
    return (await readTopic(client, name))!;
  });
}

/** A new schema version: new events are checked against it, events already written keep theirs. */
export async function addTopicVersion(ctx: TopicStoreContext, name: string, input: AddVersionInput, actor: string): Promise<Topic> {
  compileChecked(input.schema, input.examples);
  return withTransaction(ctx.pool, async (client) => {
    const row = await lock(client, name);
    if (!row) throw notFound(name);
    if (row.source === 'config') throw configTopic(name);
    const version = await insertVersion(client, name, input, actor);
    await client.query(`update topics set updated_at = clock_timestamp() where name = $1`, [name]);
    await writeAudit(client, { action: 'topic.version_added', actor, targetType: 'topic', targetId: name, details: { version } });
    await announce(client, ctx.channel, name);
    return (await readTopic(client, name))!;
  });
}

const same = (a: unknown, b: unknown): boolean => JSON.stringify(a) === JSON.stringify(b);

/**
 * Write the config's `topics.catalog` to the table, at start: each topic's description and flags,
 * and a new version when its schema or examples differ from its latest one. Under a lock, so
 * processes starting together add one version, not one each. A topic that left the file becomes
 * an API topic (kept, with its versions: events refer to them). Throws a 400 naming the key on a
 * schema that does not compile or an example that does not match.
 */
export async function syncConfigTopics(ctx: TopicStoreContext, config: Config): Promise<string[]> {
  const catalog = config.topics.catalog;
  for (const [name, t] of Object.entries(catalog)) compileChecked(t.schema, t.examples, `topics.catalog.${name}.`);
  return withTransaction(ctx.pool, async (client) => {
    await client.query(`select pg_advisory_xact_lock(hashtext('acw_topics_config'))`);
    const changed: string[] = [];
    await client.query(`update topics set source = 'api' where source = 'config' and not (name = any($1::text[]))`, [Object.keys(catalog)]);
    for (const [name, t] of Object.entries(catalog)) {
      const res = await client.query(
        `insert into topics (name, description, deprecated, deprecation_note, validation, source) values ($1, $2, $3, $4, $5, 'config')
         on conflict (name) do update set description = excluded.description, deprecated = excluded.deprecated,
           deprecation_note = excluded.deprecation_note, validation = excluded.validation, source = 'config', archived = false,
           updated_at = clock_timestamp()
         where (topics.description, topics.deprecated, topics.deprecation_note, topics.validation, topics.source, topics.archived)
           is distinct from (excluded.description, excluded.deprecated, excluded.deprecation_note, excluded.validation, 'config', false)`,
        [name, t.description, t.deprecated, t.deprecation_note, t.validation ?? null],
      );
      const current = await readTopic(client, name);
      const last = current && latest(current);
      let version: number | undefined;
      if (!last || !same(last.schema, t.schema) || !same(last.examples, t.examples)) {
        version = await insertVersion(client, name, { schema: { ...t.schema }, examples: [...t.examples] }, 'config');
        await client.query(`update topics set updated_at = clock_timestamp() where name = $1`, [name]);
      }
      if (res.rowCount === 0 && version === undefined) continue;
      changed.push(name);
      await writeAudit(client, {
        action: version === undefined ? 'topic.updated' : 'topic.version_added',
        actor: 'config',
        targetType: 'topic',
        targetId: name,
        details: version === undefined ? { source: 'config' } : { version, source: 'config' },
      });
    }
    if (changed.length > 0) await announce(client, ctx.channel, changed.join(','));
    return changed;
  });
}
