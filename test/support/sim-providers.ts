// Test providers that let the simulator's x-sim-* knobs through (the gateway forwards only a small
// allowlist of client headers), and a reply log that keeps every gateway reply of a suite so a test can
// prove no upstream key ever reached a client.

import { readFileSync } from 'node:fs';
import { MODELS_FILE } from './stack.ts';

/** Every knob header of the upstream simulator (sim/upstream/README.md). */
export const SIM_KNOBS = [
  'x-sim-fail',
  'x-sim-fail-times',
  'x-sim-fail-key',
  'x-sim-chunks',
  'x-sim-chunk-delay-ms',
  'x-sim-latency-ms',
  'x-sim-no-usage',
  'x-sim-tool',
  'x-sim-words',
] as const;

/**
 * An OpenAI-compatible provider file pointed at the simulator. Every knob passes through, and each
 * upstream request carries `x-test-provider: <name>` so the simulator's log shows which provider sent it.
 * `streamQuery` false leaves `alt` off the native Gemini stream rule, to prove the core adds it.
 */
export function simProvider(name: string): string {
  const pass = SIM_KNOBS.map((h) => `pass_header "${h}";`).join(' ');
  return `syntax "next-router/0.1";
provider "${name}" {
  defaults {
    upstream_config { base_url = "http://127.0.0.1:1"; }
    auth { auth_bearer; }
    request { set_header "x-test-provider" "${name}"; ${pass} }
    response { resp_passthrough; }
    metrics { usage_extract openai_chat_completions; }
  }
  match api = "chat.completions" stream = true {
    request { json_set "$.stream_options.include_usage" true; }
    upstream { set_path "/v1/chat/completions"; }
    response { sse_parse openai_usage_strip; }
  }
  match api = "chat.completions" { upstream { set_path "/v1/chat/completions"; } }
  match api = "native.messages" {
    request { req_map anthropic_to_openai; }
    upstream { set_path "/v1/chat/completions"; }
    response { resp_map anthropic_to_openai; sse_parse anthropic_to_openai; }
  }
  match api = "native.streamGenerateContent" {
    auth { auth_header_key "x-goog-api-key"; }
    upstream { set_path template("/v1beta/models/\${request.model_mapped}:streamGenerateContent"); }
    metrics { usage_extract gemini_generate_content; }
  }
}
`;
}

/** The shipped registry plus extra entries (YAML lines indented under `models:`). */
export function modelsWith(extraEntries: readonly string[]): string {
  const shipped = readFileSync(MODELS_FILE, 'utf8');
  return `${shipped.trimEnd()}\n${extraEntries.map((line) => `  ${line}`).join('\n')}\n`;
}

export interface LoggedReply {
  readonly url: string;
  readonly status: number;
  readonly headers: string;
  readonly body: string;
}

export interface ReplyLog {
  /** A fetch that records each reply (headers and full body, read from a clone) before returning it. */
  readonly fetch: typeof fetch;
  /** All replies recorded so far, once their bodies have been read to the end. */
  settled(): Promise<LoggedReply[]>;
}

/** Record every reply passing through the returned fetch; bodies are read in the background. */
export function createReplyLog(base: typeof fetch = globalThis.fetch): ReplyLog {
  const pending: Promise<LoggedReply | undefined>[] = [];
  const logged: typeof fetch = async function loggedFetch(input, init) {
    const res = await base(input, init);
    const copy = res.clone();
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    const headers = [...copy.headers.entries()].map(([k, v]) => `${k}: ${v}`).join('\n');
    pending.push(
      copy.text().then(
        (body) => ({ url, status: copy.status, headers, body }),
        // A body the client abandoned on purpose: keep what the headers said.
        () => ({ url, status: copy.status, headers, body: '' }),
      ),
    );
    return res;
  };
  return {
    fetch: logged,
    async settled() {
      const all = await Promise.all(pending);
      return all.filter((r): r is LoggedReply => r !== undefined);
    },
  };
}

/** Upstream keys the stack gives providers look like `sim-<provider>-key`. */
export const UPSTREAM_KEY_RE = /sim-[a-z0-9-]+-key/;
