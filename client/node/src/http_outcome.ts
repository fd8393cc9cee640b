// HTTP -> Stagger vocabulary, the same table and parsing as the C++
// client's client/internal/http_outcome.cc:
//
// outcomeFromHttpStatus:
//   200..299        SUCCESS
//   408             TIMEOUT
//   429, 503        RATE_LIMITED
//   other 500..599  RETRYABLE_FAILURE
//   300..499 else   PERMANENT_FAILURE  (an unfollowed redirect is answered
//                                       the same way again)
//   anything else   RETRYABLE_FAILURE  (1xx, 0 or negative = no response,
//                                       >= 600 = a broken peer)
//
// parseRetryAfter (RFC 9110 10.2.3), surrounding spaces/tabs ignored:
//   delta-seconds  "120"                            (1*DIGIT)
//   IMF-fixdate    "Sun, 06 Nov 1994 08:49:37 GMT"
//   RFC 850        "Sunday, 06-Nov-94 08:49:37 GMT" (94 -> 1994, 05 -> 2005)
//   asctime        "Sun Nov  6 08:49:37 1994"
// The result (ms) is clamped to [0, MAX_RETRY_AFTER_MS] (1 day): a date in
// the past or "-5" gives 0, "999999999999" one day. Anything else ("",
// "1.5", "soon", a bad month, a zone other than GMT, Feb 30) gives
// undefined: report no Retry-After. Pure functions.
import { Outcome } from "./types";
import { MAX_RETRY_AFTER_MS } from "./validation";

export { MAX_RETRY_AFTER_MS };

export function outcomeFromHttpStatus(status: number): Outcome {
  if (status >= 200 && status <= 299) return Outcome.SUCCESS;
  if (status === 408) return Outcome.TIMEOUT;
  if (status === 429 || status === 503) return Outcome.RATE_LIMITED;
  if (status >= 500 && status <= 599) return Outcome.RETRYABLE_FAILURE;
  if (status >= 300 && status <= 499) return Outcome.PERMANENT_FAILURE;
  return Outcome.RETRYABLE_FAILURE;
}

// `nowMs`: when the response was received (epoch ms); HTTP-dates are
// taken relative to it.
export function parseRetryAfter(header: string, nowMs: number): number | undefined {
  const s = header.replace(/^[ \t\n\v\f\r]+|[ \t\n\v\f\r]+$/g, "");
  if (s === "") return undefined;
  if (/^[0-9]+$/.test(s)) return deltaSecondsMs(s);
  if (/^-[0-9]+$/.test(s)) return 0;
  if (!/^[A-Za-z]/.test(s)) return undefined;
  const t = parseHttpDate(s);
  if (t === undefined) return undefined;
  return Math.min(Math.max(t - nowMs, 0), MAX_RETRY_AFTER_MS);
}

// Saturating: any count above one day is one day.
function deltaSecondsMs(digits: string): number {
  const maxSeconds = MAX_RETRY_AFTER_MS / 1000;
  let v = 0;
  for (const c of digits) {
    v = v * 10 + (c.charCodeAt(0) - 48);
    if (v > maxSeconds) return MAX_RETRY_AFTER_MS;
  }
  return v * 1000;
}

const MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];
const DAYS = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];
const FULL_DAYS = ["sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"];

// The three forms by their exact shape (A letter, D digit, _ digit or
// space), then their fields checked as absl::ParseTime checks them: names
// case-insensitive, day 1..31, hour 0..23, minute 0..59, second 0..60 (a
// leap second is the next minute's start), no date that would normalise
// (Feb 30). The weekday name is not checked against the date.
function parseHttpDate(s: string): number | undefined {
  let m: RegExpMatchArray | null;
  if ((m = s.match(/^([A-Za-z]{3}), (\d\d) ([A-Za-z]{3}) (\d{4}) (\d\d):(\d\d):(\d\d) GMT$/))) {
    return DAYS.includes(m[1]!.toLowerCase())
      ? utc(+m[4]!, m[3]!, +m[2]!, +m[5]!, +m[6]!, +m[7]!)
      : undefined;
  }
  if ((m = s.match(/^([A-Za-z]{3}) ([A-Za-z]{3}) ([ \d]\d) (\d\d):(\d\d):(\d\d) (\d{4})$/))) {
    if (!DAYS.includes(m[1]!.toLowerCase())) return undefined;
    return utc(+m[7]!, m[2]!, +m[3]!.trim(), +m[4]!, +m[5]!, +m[6]!);
  }
  if ((m = s.match(/^([A-Za-z]{6,}), (\d\d)-([A-Za-z]{3})-(\d\d) (\d\d):(\d\d):(\d\d) GMT$/))) {
    if (!FULL_DAYS.includes(m[1]!.toLowerCase())) return undefined;
    const yy = +m[4]!;
    return utc(yy >= 69 ? 1900 + yy : 2000 + yy, m[3]!, +m[2]!, +m[5]!, +m[6]!, +m[7]!);
  }
  return undefined;
}

function utc(year: number, monthName: string, day: number, h: number, min: number, sec: number) {
  const month = MONTHS.indexOf(monthName.toLowerCase());
  if (month < 0 || day < 1 || day > 31 || h > 23 || min > 59 || sec > 60) return undefined;
  const t = Date.UTC(year, month, day, h, min, Math.min(sec, 59));
  const d = new Date(t);
  // Date.UTC maps years 0..99 to 1900..1999: set the year itself.
  d.setUTCFullYear(year, month, day);
  if (d.getUTCMonth() !== month || d.getUTCDate() !== day) return undefined; // Feb 30
  return d.getTime() + (sec === 60 ? 1000 : 0);
}
