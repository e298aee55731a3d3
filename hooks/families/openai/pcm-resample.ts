// 16 kHz PCM16 (mono, little-endian: the Live API's usual input) to the 24 kHz OpenAI Realtime takes, by
// linear interpolation. Upsampling adds no aliasing; chunks of one stream join without a seam, because
// the last sample of a chunk is kept for the next.

/** One audio stream's upsampler: push() its chunks in order, flush() at its end. */
export class Upsampler16kTo24k {
  /** The last sample of the previous chunk. */
  private last = 0;
  /** Input samples seen, output samples made. */
  private inputs = 0;
  private outputs = 0;

  /** A chunk of whole samples (an even number of bytes); what can be made of it so far. */
  push(chunk: Buffer): Buffer {
    const base = this.inputs;
    const n = chunk.length >> 1;
    this.inputs += n;
    const sample = (j: number) => (j < base ? this.last : chunk.readInt16LE((j - base) * 2));
    const out: number[] = [];
    // Output sample k sits at input position 2k/3; it needs the samples on both sides of it.
    for (;;) {
      const k = this.outputs;
      const i = Math.floor((2 * k) / 3);
      if (i + 1 >= this.inputs) break;
      const frac = ((2 * k) % 3) / 3;
      const a = sample(i);
      out.push(frac === 0 ? a : Math.round(a + (sample(i + 1) - a) * frac));
      this.outputs++;
    }
    if (n > 0) this.last = chunk.readInt16LE((n - 1) * 2);
    return pcm(out);
  }

  /** The samples the stream's end still owes (the last input sample held); the next push starts anew. */
  flush(): Buffer {
    const out: number[] = [];
    while (Math.floor((2 * this.outputs) / 3) < this.inputs) {
      out.push(this.last);
      this.outputs++;
    }
    this.last = 0;
    this.inputs = 0;
    this.outputs = 0;
    return pcm(out);
  }
}

function pcm(samples: readonly number[]): Buffer {
  const out = Buffer.alloc(samples.length * 2);
  for (const [i, s] of samples.entries()) out.writeInt16LE(Math.max(-32768, Math.min(32767, s)), i * 2);
  return out;
}
