/** Pieces of option definitions shared by commands and their actions; nothing here imports anything. */

/** Commander collector for a repeatable option. */
export const collect = (value: string, previous: string[] = []): string[] => [...previous, value];

/** `alerts` prints the newest 50; `alerts --follow` starts like `tail -f`, with the last 10. */
export const ALERTS_LIST_DEFAULT = 50;
export const ALERTS_TAIL_DEFAULT = 10;
