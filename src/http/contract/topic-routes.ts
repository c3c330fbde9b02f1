/** The topic catalog's operations of the route registry (routes.ts), in the docs' order. */
import { z } from 'zod';
import { addVersionInput, createTopicInput, topicParams, updateTopicInput } from '../../topics/input.js';
import { ACCESS } from '../../roles.js';
import * as T from './topic-answers.js';
import { testDeliveryAnswer } from './answers.js';
import { json, type RouteDoc } from './route-doc.js';

export const sendExampleBody = z.strictObject({
  endpoint: z.string().max(100).describe('the endpoint that gets it, whatever its whitelist'),
  example: z.int().min(0).max(19).optional().describe('which example of the latest version (default 0)'),
});

export const TOPIC_OPERATIONS = {
  listTopics: {
    method: 'GET',
    url: '/v1/topics',
    summary: 'The topic catalog: each topic with its schema versions, examples and subscribing endpoints',
    access: ACCESS.read,
    answers: { 200: json('every topic, archived ones included', T.topicList) },
  },
  getTopic: {
    method: 'GET',
    url: '/v1/topics/:name',
    summary: 'One topic of the catalog',
    access: ACCESS.read,
    params: topicParams,
    answers: { 200: json('the topic', T.topicAnswer) },
    errors: { 404: 'no topic of this name' },
  },
  createTopic: {
    method: 'POST',
    url: '/v1/topics',
    summary: 'Declare a topic with its schema (version 1) and examples',
    access: ACCESS.admin,
    body: createTopicInput,
    answers: { 201: json('the topic', T.topicAnswer) },
    errors: { 409: 'the name is taken (archived topics too)' },
  },
  updateTopic: {
    method: 'PATCH',
    url: '/v1/topics/:name',
    summary: "Change a topic's description, deprecation, archived flag or validation mode",
    access: ACCESS.admin,
    params: topicParams,
    body: updateTopicInput,
    answers: { 200: json('the topic', T.topicAnswer) },
    errors: { 404: 'no topic of this name', 409: 'a topic of the config file: change the file' },
  },
  addTopicVersion: {
    method: 'POST',
    url: '/v1/topics/:name/versions',
    summary: 'A new schema version: new events are validated against it, older events keep theirs',
    access: ACCESS.admin,
    params: topicParams,
    body: addVersionInput,
    answers: { 201: json('the topic, with the new version last', T.topicAnswer) },
    errors: { 404: 'no topic of this name', 409: 'a topic of the config file: change the file' },
  },
  sendTopicExample: {
    method: 'POST',
    url: '/v1/topics/:name/send-example',
    summary: "Send the topic's example to one endpoint as a test delivery",
    access: ACCESS.admin,
    params: topicParams,
    body: sendExampleBody,
    answers: { 202: json('the test event and its one job', testDeliveryAnswer) },
    errors: { 404: 'no topic or endpoint of this name, or no such example', 409: 'the endpoint is disabled or paused' },
  },
} as const satisfies Record<string, RouteDoc>;
