import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { tuneHeapForService } from '../../src/runtime.js';

describe('heap growth of the long-running commands', () => {
  it('is applied unless the operator set a heap flag of their own', () => {
    expect(tuneHeapForService({}, [])).toBe(true);
    expect(tuneHeapForService({ NODE_OPTIONS: '--enable-source-maps' }, ['--no-warnings'])).toBe(true);
    expect(tuneHeapForService({ NODE_OPTIONS: '--max-old-space-size=4096' }, [])).toBe(false);
    expect(tuneHeapForService({}, ['--max-semi-space-size=32'])).toBe(false);
    expect(tuneHeapForService({ NODE_OPTIONS: '--heap-growing-percent=50' }, [])).toBe(false);
    // V8 takes either spelling.
    expect(tuneHeapForService({ NODE_OPTIONS: '--max_old_space_size=512' }, [])).toBe(false);
  });

  // Node 20 (V8 11.3) honours the flag at run time: the old generation stays well under the
  // untuned one. Node 24's V8 13 ignores it for this churn even on the command line (old space
  // 224 MB either way, measured), so there the two kinds are one distribution, bimodal between
  // about 50 and 350 MB by where the major collections fall: comparing two samples of it fails by
  // chance (the highest of five differed by 1.4x on CI), and proves nothing about the flag. The
  // check runs where the flag acts; CI runs this file on Node 20.
  const honoured = Number(process.versions.node.split('.')[0]) < 22;
  /** The most the tuned peak may be, as a share of the plain one. */
  const bound = 0.8;
  /** Runs of each kind: the highest peak of five is steady where one run's peak is not (below). */
  const RUNS = 5;
  it.skipIf(!honoured)(
    `keeps the old generation under ${bound} of the untuned one while garbage is made fast`,
    async () => {
      // The same churn (a live set, and garbage that lives long enough to be promoted before it
      // dies, as in-flight deliveries do) with and without the setting, each in a fresh process.
      // What is measured is old space, the generation the flag governs (heapTotal adds the young
      // generation, which V8 sizes on its own).
      const script = `
      import v8 from 'node:v8';
      const { tuneHeapForService } = await import(${JSON.stringify(new URL('../../dist/runtime.js', import.meta.url).href)});
      if (process.argv[1] === 'tuned') tuneHeapForService({}, []);
      const oldSpace = () => v8.getHeapSpaceStatistics().find((s) => s.space_name === 'old_space').space_size;
      const live = Array.from({ length: 100_000 }, (_, i) => ({ i, s: 'live-' + i, a: [i] }));
      let peak = 0; const ring = new Array(200_000);
      for (let i = 0; i < 2_000_000; i++) {
        ring[i % ring.length] = { i, s: 'garbage-' + i, a: [i, i] };
        if (i % 5_000 === 0) peak = Math.max(peak, oldSpace());
      }
      process.stdout.write(String(Math.round(peak / 1e6) + live.length * 0));`;
      // --single-threaded-gc: V8 sizes the next old generation from how fast it collects against how
      // fast the program allocates; with helper threads collecting, that ratio follows how busy the
      // machine's other cores are. On the main thread alone both slow down together.
      const run = async (mode: string): Promise<number> => {
        const r = await promisify(execFile)(process.execPath, ['--single-threaded-gc', '--input-type=module', '-e', script, mode], {
          encoding: 'utf8',
          env: { ...process.env, NODE_OPTIONS: '' },
        });
        return Number(r.stdout);
      };
      // Side by side, one pair at a time: each child's work is fixed (about 1 s of CPU), its wall
      // time is whatever the machine gives it. One run's peak depends on where its major collections
      // fall, so a single pair can differ by 1.3x either way. The highest of five runs is the ceiling
      // the churn reaches, which is steady on Node 20: 230 MB untuned, 85-140 MB tuned, on two loaded
      // cores (measured). The deadline is only a hang guard.
      const plain: number[] = [];
      const tuned: number[] = [];
      for (let i = 0; i < RUNS; i++) {
        const [p, t] = await Promise.all([run('plain'), run('tuned')]);
        plain.push(p);
        tuned.push(t);
      }
      expect(Math.max(...tuned), `peaks in MB, tuned ${tuned.join(' ')}, plain ${plain.join(' ')}`).toBeLessThan(
        Math.max(...plain) * bound,
      );
    },
    180_000,
  );
});
