// Usage presets: how to read token counts from one provider family's replies, JSON or streamed.
// Named in provider files as `metrics { usage_extract <preset>; }`.

import type { JsonValue, Usage } from '../types.ts';

/** Per-request, incremental reader of usage from SSE events (constant memory). */
export interface UsageSniffer {
  /** Feed one SSE event (data text without the `data: ` prefix). Must never throw. */
  event(event: string | undefined, data: string): void;
  /** Usage seen so far, or undefined if the upstream reported none. */
  result(): Usage | undefined;
  /**
   * True once the upstream's closing report was read, so result() is the final count; false while it
   * is a running one (a stream cut or failed before its end reports less than was generated).
   */
  final(): boolean;
}

export interface UsagePreset {
  readonly name: string;
  /** Usage from a complete JSON reply, or undefined when it carries none. Must never throw. */
  fromJson(body: JsonValue): Usage | undefined;
  createSniffer(): UsageSniffer;
}
