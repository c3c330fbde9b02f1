import { describe, expect, test } from 'vitest';
import { isValidTopic, isValidTopicPattern, topicMatches } from '../../src/config/topics.js';

describe('topicMatches', () => {
  test.each([
    [['a.*'], 'a.b', true],
    [['a.*'], 'a.b.c', true],
    [['a.*'], 'a', false],
    [['a.*'], 'ab.c', false],
    [['a.b.*'], 'a.b.c', true],
    [['a.b.*'], 'a.bc.d', false],
    [['*'], 'anything.at.all', true],
    [['*'], 'x', true],
    [['a.b'], 'a.b', true],
    [['a.b'], 'a.b.c', false],
    [['a.b'], 'a', false],
    [['a.b'], 'a.bc', false],
    [[], 'a.b', false],
    [['x', 'workspace.*'], 'workspace.sync_failed', true],
    [['workspace.sync_failed', 'worktree.prune_pending'], 'worktree.prune_pending', true],
  ])('%j admits %s: %s', (patterns, topic, expected) => {
    expect(topicMatches(patterns, topic)).toBe(expected);
  });
});

describe('topic grammar', () => {
  test.each(['a', 'a.b', 'workspace.sync_failed', 'x1.y_2.z'])('%s is a topic', (t) => {
    expect(isValidTopic(t)).toBe(true);
  });

  test.each(['', 'A.b', 'a..b', '.a', 'a.', 'a-b', 'a.*', '*', 'a b'])('%j is not a topic', (t) => {
    expect(isValidTopic(t)).toBe(false);
  });

  test.each(['*', 'a.*', 'a.b.*', 'a.b'])('%s is a whitelist pattern', (p) => {
    expect(isValidTopicPattern(p)).toBe(true);
  });

  test.each(['a*', '*.a', 'a.*.b', '.*', 'A.*', 'a.**', ''])('%j is not a whitelist pattern', (p) => {
    expect(isValidTopicPattern(p)).toBe(false);
  });
});
