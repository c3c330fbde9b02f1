import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import uPlot from 'uplot';
import type { Stats } from './api.js';

/** Buckets with no attempts are absent from the API's answer: zero-filled here, so the line does not skip them. */
function series(d: Stats['deliveries'], now: number): [number[], Array<number | null>, Array<number | null>] {
  const step = d.bucket_seconds;
  const byTime = new Map(d.buckets.map((b) => [Math.floor(new Date(b.at).getTime() / 1000), b]));
  const end = Math.floor(now / 1000 / step) * step;
  const n = d.window === '24h' ? 96 : 60;
  const xs: number[] = [];
  const rate: Array<number | null> = [];
  const fail: Array<number | null> = [];
  for (let t = end - (n - 1) * step; t <= end; t += step) {
    const b = byTime.get(t);
    const total = b ? b.ok + b.failed : 0;
    xs.push(t);
    rate.push(total / (step / 60));
    fail.push(total > 0 ? (100 * (b?.failed ?? 0)) / total : null);
  }
  return [xs, rate, fail];
}

const cssVar = (name: string): string => getComputedStyle(document.documentElement).getPropertyValue(name).trim() || '#888';

/** A small chart of deliveries per minute (left axis) and failure rate (right axis, %). */
const DARK = matchMedia('(prefers-color-scheme: dark)');

export function DeliveriesChart({ stats, label }: { stats: Stats; label: string }): VNode {
  const box = useRef<HTMLDivElement>(null);
  // Canvas colours are fixed when drawn: a change of the system theme redraws.
  const [dark, setDark] = useState(DARK.matches);
  useEffect(() => {
    const on = (): void => setDark(DARK.matches);
    DARK.addEventListener('change', on);
    return () => DARK.removeEventListener('change', on);
  }, []);
  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const fg = cssVar('--muted');
    const grid = cssVar('--line');
    const axis = { stroke: fg, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } };
    const plot = new uPlot(
      {
        width: Math.max(240, el.clientWidth),
        height: 160,
        // Our own legend below: uPlot's shows `--` for each value until the pointer is over the chart,
        // and was cut off at the side of a narrow chart.
        legend: { show: false },
        cursor: { drag: { x: false, y: false } },
        scales: { x: { time: true }, pct: { range: [0, 100] } },
        axes: [axis, { ...axis, size: 44 }, { ...axis, scale: 'pct', side: 1, size: 52, values: (_u, v) => v.map((x) => `${x}%`) }],
        series: [
          {},
          { label: 'deliveries/min', stroke: cssVar('--accent'), width: 2, fill: cssVar('--accent-fill') },
          { label: 'failed %', scale: 'pct', stroke: cssVar('--bad'), width: 1.5, points: { show: true, size: 5 } },
        ],
      },
      series(stats.deliveries, new Date(stats.now).getTime()),
      el,
    );
    const ro = new ResizeObserver(() => plot.setSize({ width: Math.max(240, el.clientWidth), height: 160 }));
    ro.observe(el);
    return () => {
      ro.disconnect();
      plot.destroy();
    };
  }, [stats, dark]);
  return html`<figure class="chart">
    <figcaption>${label}</figcaption>
    <div
      ref=${box}
      role="img"
      aria-label=${`${label}: ${stats.deliveries.per_minute.toFixed(1)} deliveries per minute on average, ${(100 * stats.deliveries.failure_rate).toFixed(1)}% failed`}
    ></div>
    <ul class="legend">
      <li><span class="mark m-rate"></span>deliveries/min</li>
      <li><span class="mark m-fail"></span>failed %</li>
    </ul>
  </figure>`;
}
