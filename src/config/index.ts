/** Configuration: schema (defaults and docs), loading, durations, topics and endpoints. */
export { formatDuration, formatSize, parseDuration, parseSize } from './duration.js';
export {
  configWarnings,
  isSinkEndpoint,
  resolveEndpoints,
  resolveSinks,
  sinkEndpointName,
  DEFAULT_ENDPOINT,
  SINK_PREFIX,
  type Endpoint,
} from './endpoints.js';
export { ConfigError, formatPath } from './errors.js';
export { interpolate, interpolateString, type Env } from './interpolate.js';
export { parseListen, type ListenAddress } from './listen.js';
export { configPath, loadConfig, parseConfig, runnerConfig, type LoadOptions } from './load.js';
export { maskConfig } from './mask.js';
export { redactUrl, REDACTED } from './redact-url.js';
export { isStandardSecret } from './rules.js';
export {
  configSchema,
  LOG_LEVELS,
  ROLES,
  SCHEMES,
  SINK_FORMATS,
  VALIDATION_MODES,
  APP_RUNNERS,
  type AppRunnerConfig,
  type Config,
  type ConfigData,
  type DeepReadonly,
  type LogLevel,
  type Role,
  type Scheme,
  type SinkFormat,
  type ValidationMode,
} from './schema.js';
export { isValidTopic, isValidTopicPattern, topicMatches } from './topics.js';
