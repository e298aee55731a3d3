// The part of autocannon's API the bench uses (the package ships no type declarations).
declare module 'autocannon' {
  interface AutocannonOptions {
    url: string;
    method?: string;
    headers?: Record<string, string>;
    body?: string | Buffer;
    connections?: number;
    pipelining?: number;
    /** Seconds. */
    duration?: number;
    amount?: number;
    /** Seconds. */
    timeout?: number;
  }
  interface Stat {
    average: number;
    mean: number;
    stddev: number;
    min: number;
    max: number;
    p50: number;
    p90: number;
    p99: number;
    total: number;
  }
  interface AutocannonResult {
    requests: Stat & { sent: number };
    latency: Stat;
    throughput: Stat;
    errors: number;
    timeouts: number;
    non2xx: number;
    resets: number;
    '2xx': number;
    /** Seconds. */
    duration: number;
  }
  function autocannon(opts: AutocannonOptions): Promise<AutocannonResult>;
  export default autocannon;
}
