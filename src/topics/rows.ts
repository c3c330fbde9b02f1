/** The topic catalog's rows (migration topic_catalog): what a topic is, read in one statement. */
import type { Queryable } from '../db/pool.js';
import type { ValidationMode } from '../config/index.js';

export interface TopicVersion {
  version: number;
  schema: Record<string, unknown>;
  examples: unknown[];
  created_by: string;
  created_at: string;
}

export interface Topic {
  name: string;
  description: string;
  deprecated: boolean;
  deprecation_note: string;
  archived: boolean;
  /** This topic's own mode; null: topics.validation. */
  validation: ValidationMode | null;
  source: 'api' | 'config';
  created_at: string;
  updated_at: string;
  /** Oldest first; the last is the one new events are validated against. */
  versions: TopicVersion[];
}

/** The version new events of the topic are checked against. */
export const latest = (t: Topic): TopicVersion | undefined => t.versions[t.versions.length - 1];

const SELECT = `select t.name, t.description, t.deprecated, t.deprecation_note, t.archived, t.validation, t.source,
    t.created_at, t.updated_at,
    coalesce((select json_agg(json_build_object('version', v.version, 'schema', v.schema, 'examples', v.examples,
        'created_by', v.created_by, 'created_at', v.created_at) order by v.version)
      from topic_versions v where v.topic = t.name), '[]'::json) as versions
  from topics t`;

interface Row extends Omit<Topic, 'created_at' | 'updated_at'> {
  created_at: Date;
  updated_at: Date;
}

const toTopic = (r: Row): Topic => ({ ...r, created_at: r.created_at.toISOString(), updated_at: r.updated_at.toISOString() });

/** Every topic, archived ones included, by name. */
export async function readTopics(db: Queryable): Promise<Topic[]> {
  const res = await db.query<Row>(`${SELECT} order by t.name`);
  return res.rows.map(toTopic);
}

export async function readTopic(db: Queryable, name: string): Promise<Topic | undefined> {
  const res = await db.query<Row>(`${SELECT} where t.name = $1`, [name]);
  const row = res.rows[0];
  return row ? toTopic(row) : undefined;
}

/** A fingerprint that moves with every change: the poll reads the catalog again only when it moved. */
export async function catalogVersion(db: Queryable): Promise<string> {
  const res = await db.query<{ v: string }>(
    `select (select count(*) from topic_versions)::text || ':' || (select count(*) from topics)::text || ':' ||
       coalesce((select max(updated_at) from topics)::text, '') as v`,
  );
  return res.rows[0]?.v ?? '';
}
