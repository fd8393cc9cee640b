// Durations and instants between the client's milliseconds, the wire's
// google.protobuf.Duration / Timestamp, and the text staggerd writes in
// its messages (absl::FormatDuration: "-1s", "1m0.5s", "2m", "500ms").
//
// Contract: formatDuration is exact for any integer nanosecond count
// (bigint); the others convert through integer nanoseconds, rounding a
// fractional nanosecond to the nearest. Pure functions.
import type { Duration } from "./gen/google/protobuf/duration";
import type { Timestamp } from "./gen/google/protobuf/timestamp";

export const NANOS_PER_MS = 1_000_000n;
const NANOS_PER_SECOND = 1_000_000_000n;

export function msToNanos(ms: number): bigint {
  return BigInt(Math.round(ms * 1e6));
}

export function nanosToMs(ns: bigint): number {
  return Number(ns) / 1e6;
}

// absl::FormatDuration's text: hours, minutes and fractional seconds for a
// second or more ("1h2m3.5s"); below a second one fractional unit
// ("1.5ms", "250us", "10ns"); "0" for zero.
export function formatDuration(ns: bigint): string {
  if (ns < 0n) return "-" + formatDuration(-ns);
  if (ns === 0n) return "0";
  if (ns < NANOS_PER_SECOND) {
    if (ns < 1000n) return fractional(Number(ns), "ns", 2, 1e2);
    if (ns < 1_000_000n) return fractional(Number(ns) / 1e3, "us", 5, 1e5);
    return fractional(Number(ns) / 1e6, "ms", 8, 1e8);
  }
  const hours = ns / (3600n * NANOS_PER_SECOND);
  let rest = ns % (3600n * NANOS_PER_SECOND);
  const minutes = rest / (60n * NANOS_PER_SECOND);
  rest = rest % (60n * NANOS_PER_SECOND);
  let out = "";
  if (hours !== 0n) out += `${hours}h`;
  if (minutes !== 0n) out += `${minutes}m`;
  out += fractional(Number(rest) / 1e9, "s", 11, 1e11);
  return out === "" ? "0" : out;
}

// absl's AppendNumberUnit for a double: the integer part, then up to `prec`
// fraction digits (trailing zeros dropped); nothing when both are zero.
function fractional(n: number, unit: string, prec: number, pow10: number): string {
  const intPart = Math.trunc(n);
  const frac = Math.floor((n - intPart) * pow10 + 0.5);
  if (intPart === 0 && frac === 0) return "";
  let out = String(intPart);
  if (frac !== 0) out += "." + String(frac).padStart(prec, "0").replace(/0+$/, "");
  return out + unit;
}

export function formatMs(ms: number): string {
  return formatDuration(msToNanos(ms));
}

// ms -> Duration; seconds and nanos share the sign (as wire::ToProto).
export function durationFromMs(ms: number): Duration {
  const ns = msToNanos(ms);
  return { seconds: ns / NANOS_PER_SECOND, nanos: Number(ns % NANOS_PER_SECOND) };
}

// Duration -> ms, or undefined if it is not a valid Duration (out of its
// +-10000 years, nanos out of range, or signs that disagree).
export function durationToMs(d: Duration): number | undefined {
  const maxSeconds = 315_576_000_000n;
  const inRange =
    d.seconds >= -maxSeconds && d.seconds <= maxSeconds && d.nanos > -1e9 && d.nanos < 1e9;
  const sameSign = !(d.seconds > 0n && d.nanos < 0) && !(d.seconds < 0n && d.nanos > 0);
  if (!inRange || !sameSign) return undefined;
  return nanosToMs(d.seconds * NANOS_PER_SECOND + BigInt(d.nanos));
}

// epoch ms -> Timestamp (nanos >= 0, as the Timestamp spec).
export function timestampFromMs(ms: number): Timestamp {
  const ns = msToNanos(ms);
  let seconds = ns / NANOS_PER_SECOND;
  let nanos = ns % NANOS_PER_SECOND;
  if (nanos < 0n) {
    seconds -= 1n;
    nanos += NANOS_PER_SECOND;
  }
  return { seconds, nanos: Number(nanos) };
}

export function timestampToMs(t: Timestamp): number {
  return nanosToMs(t.seconds * NANOS_PER_SECOND + BigInt(t.nanos));
}
