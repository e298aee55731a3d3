// A sampled stream is parsed for its span's facts only until the reply's id and model are known, then
// only at the events each family's finishMarker matches (proxy/request-trace.ts wantsEvent). Over every
// recorded stream of every family, that reading ends with the same facts as parsing every event.

import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import type { JsonValue } from '../../../common/types.ts';
import { anthropicTelemetry } from '../../../hooks/families/anthropic/telemetry.ts';
import { geminiTelemetry } from '../../../hooks/families/gemini/telemetry.ts';
import { openaiTelemetry } from '../../../hooks/families/openai/telemetry.ts';
import { responsesTelemetry } from '../../../hooks/families/responses/telemetry.ts';
import type { FamilyTelemetry, ReplyFacts } from '../../../hooks/families/types.ts';
import { ROOT } from '../../support/stack.ts';

const FIXTURES = join(ROOT, 'test/fixtures');

/** Every recorded SSE stream with the family whose replies it holds. */
function streams(): { file: string; telemetry: FamilyTelemetry }[] {
  const familyOf = (name: string): FamilyTelemetry =>
    name.includes('responses')
      ? responsesTelemetry
      : name.includes('anthropic') || name.includes('messages')
        ? anthropicTelemetry
        : name.includes('gemini')
          ? geminiTelemetry
          : openaiTelemetry;
  const out: { file: string; telemetry: FamilyTelemetry }[] = [];
  for (const name of readdirSync(join(FIXTURES, 'usage')))
    if (name.endsWith('.sse')) out.push({ file: join('usage', name), telemetry: familyOf(name) });
  for (const family of readdirSync(join(FIXTURES, 'upstream'), { withFileTypes: true })) {
    if (!family.isDirectory()) continue;
    for (const name of readdirSync(join(FIXTURES, 'upstream', family.name)))
      if (name.endsWith('.sse'))
        out.push({
          file: join('upstream', family.name, name),
          telemetry: familyOf(name.includes('responses') ? name : family.name),
        });
  }
  return out;
}

function events(file: string): string[] {
  return readFileSync(join(FIXTURES, file), 'utf8')
    .split('\n')
    .filter((l) => l.startsWith('data:'))
    .map((l) => l.slice(5).trim())
    .filter((d) => d.startsWith('{'));
}

test('every recorded stream: reading only at the finish marker once id and model are known loses no fact', () => {
  const all = streams();
  assert.ok(all.length >= 8, `recorded streams found: ${all.length}`);
  let skipped = 0;
  let read = 0;
  for (const { file, telemetry } of all) {
    const every: ReplyFacts = {};
    const gated: ReplyFacts = {};
    for (const data of events(file)) {
      const value = JSON.parse(data) as JsonValue;
      telemetry.readReply(value, every);
      if (gated.id === undefined || gated.model === undefined || telemetry.finishMarker.test(data))
        telemetry.readReply(value, gated);
      else skipped++;
      read++;
    }
    assert.deepEqual(gated, every, file);
    if (!file.includes('error'))
      assert.ok(every.finishReasons !== undefined, `${file}: the stream names how it finished`);
  }
  // Most events carry neither a new fact nor the end.
  assert.ok(skipped > read / 2, `${skipped} of ${read} events skipped`);
});
