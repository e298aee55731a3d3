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
    // Output sample k sits at input position 2k/3; it needs the samples on both sides of it
    // (floor(2k/3) + 1 < inputs, so k < 3(inputs - 1)/2).
    const end = Math.max(this.outputs, Math.ceil((3 * (this.inputs - 1)) / 2));
    // Written in place: an array of numbers would take ~8 times the output's size.
    const out = Buffer.allocUnsafe((end - this.outputs) * 2);
    for (let at = 0; this.outputs < end; this.outputs++, at += 2) {
      const k = this.outputs;
      const i = Math.floor((2 * k) / 3);
      const frac = ((2 * k) % 3) / 3;
      const a = sample(i);
      // Between two samples: always in range.
      out.writeInt16LE(frac === 0 ? a : Math.round(a + (sample(i + 1) - a) * frac), at);
    }
    if (n > 0) this.last = chunk.readInt16LE((n - 1) * 2);
    return out;
  }

  /** The samples the stream's end still owes (the last input sample held); the next push starts anew. */
  flush(): Buffer {
    // Output k is owed while floor(2k/3) < inputs, so k < 3 inputs / 2.
    const owed = Math.max(0, Math.ceil((3 * this.inputs) / 2) - this.outputs);
    const out = Buffer.allocUnsafe(owed * 2);
    for (let at = 0; at < out.length; at += 2) out.writeInt16LE(this.last, at);
    this.last = 0;
    this.inputs = 0;
    this.outputs = 0;
    return out;
  }
}
