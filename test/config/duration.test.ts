import { describe, expect, test } from 'vitest';
import { formatDuration, formatSize, parseDuration, parseSize } from '../../src/config/duration.js';
import { parseListen } from '../../src/config/listen.js';

describe('parseDuration', () => {
  test.each([
    ['500ms', 500],
    ['30s', 30_000],
    ['5m', 300_000],
    ['24h', 86_400_000],
    ['720h', 2_592_000_000],
    ['1h30m', 5_400_000],
    ['1.5s', 1500],
    ['.5s', 500],
    ['0s', 0],
    ['0', 0],
    ['1m30s500ms', 90_500],
    ['1.1h', 3_960_000],
    ['250us', 0.25],
    ['250µs', 0.25],
    ['1ns', 0.000001],
  ])('reads %s as %d ms', (text, ms) => {
    expect(parseDuration(text)).toBe(ms);
  });

  test.each(['5 minutes', '10', '', '-5s', '+5s', '5', 's', '5d', '1h 30m', ' 5m', '5m ', '5M', '1.s.s', 'abc'])('rejects %j', (text) => {
    expect(() => parseDuration(text)).toThrow(`expected a duration like "5m", got ${JSON.stringify(text)}`);
  });
});

describe('formatDuration', () => {
  test.each([
    [90_000, '1m30s'],
    [0, '0s'],
    [500, '500ms'],
    [1500, '1.5s'],
    [300_000, '5m'],
    [5_400_000, '1h30m'],
    [2_592_000_000, '720h'],
    [90_061_500, '25h1m1.5s'],
    [0.25, '250µs'],
  ])('writes %d ms as %s', (ms, text) => {
    expect(formatDuration(ms)).toBe(text);
  });

  test('round-trips through parseDuration', () => {
    for (const ms of [1, 999, 1000, 61_000, 3_600_001, 604_800_000]) {
      expect(parseDuration(formatDuration(ms))).toBe(ms);
    }
  });
});

describe('parseSize', () => {
  test.each([
    ['1mb', 1_048_576],
    ['256kb', 262_144],
    ['512b', 512],
    ['2MB', 2_097_152],
    ['1Kb', 1024],
    ['1gb', 1_073_741_824],
    ['1.5kb', 1536],
    ['1mib', 1_048_576],
  ])('reads %s as %d bytes', (text, bytes) => {
    expect(parseSize(text)).toBe(bytes);
  });

  test.each(['1 mb', '1024', '', '-1kb', 'mb', '1tb', '1m'])('rejects %j', (text) => {
    expect(() => parseSize(text)).toThrow('expected a size like "1mb"');
  });

  test('formatSize writes the largest exact unit', () => {
    expect(formatSize(1_048_576)).toBe('1mb');
    expect(formatSize(1536)).toBe('1536b');
    expect(formatSize(262_144)).toBe('256kb');
  });
});

describe('parseListen', () => {
  test.each([
    ['127.0.0.1:8080', '127.0.0.1', 8080],
    ['localhost:0', 'localhost', 0],
    ['[::1]:65535', '::1', 65535],
    ['0.0.0.0:80', '0.0.0.0', 80],
  ])('reads %s', (text, host, port) => {
    expect(parseListen(text)).toEqual({ host, port });
  });

  test.each(['8080', ':8080', 'localhost:65536', 'localhost:', 'local host:80', '::1:80', 'http://x:80'])('rejects %j', (text) => {
    expect(() => parseListen(text)).toThrow('expected HOST:PORT');
  });
});
