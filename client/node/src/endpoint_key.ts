// endpointKeyFromUrl: the endpoint key to send for a delivery URL, without
// the secrets URLs carry -- the C++ client's client/internal/key_from_url.cc, with
// its normalisation and its messages:
//
//   key = scheme "://" host [":" port] ["/" seg1 ... "/" segN]
//   * scheme and host lower-cased (ASCII); an IPv6 host keeps its brackets;
//   * the port only if it is not the scheme's default (http 80, https 443);
//   * the first `pathSegments` non-empty path segments (default 0), as
//     written (percent-encoding kept);
//   * never userinfo, query or fragment.
// Throws InvalidArgumentError ("url: ..." / "path_segments: ...") for no
// "://", a bad scheme, no host, a port not in 1..65535, a control
// character or space, a URL over MAX_URL_BYTES (UTF-8), pathSegments
// outside 0..MAX_PATH_SEGMENTS. Pure.
import { InvalidArgumentError } from "./errors";

export const MAX_URL_BYTES = 8192;
export const MAX_PATH_SEGMENTS = 16;

function bad(what: string): InvalidArgumentError {
  return new InvalidArgumentError(`url: ${what}`);
}

const asciiLower = (s: string) => s.replace(/[A-Z]/g, (c) => c.toLowerCase());

// "host[:port]" (IPv6 in brackets) -> [lower-cased host, port text].
function splitHostPort(authority: string): [string, string] {
  let h = authority;
  let port = "";
  if (h.startsWith("[")) {
    const close = h.indexOf("]");
    if (close < 0) throw bad("unclosed '[' in the host");
    const rest = h.slice(close + 1);
    h = h.slice(0, close + 1);
    if (rest !== "") {
      if (rest[0] !== ":") throw bad("junk after the IPv6 host");
      port = rest.slice(1);
    }
  } else {
    const colon = h.lastIndexOf(":");
    if (colon >= 0) {
      port = h.slice(colon + 1);
      h = h.slice(0, colon);
    }
  }
  if (h === "" || h === "[]") throw bad("no host");
  return [asciiLower(h), port];
}

// absl::SimpleAtoi into an int: optional sign, digits, within int32.
function parsePort(text: string): number | undefined {
  if (!/^[+-]?[0-9]+$/.test(text)) return undefined;
  const v = Number(text);
  return v >= -(2 ** 31) && v < 2 ** 31 ? v : undefined;
}

export function endpointKeyFromUrl(url: string, pathSegments = 0): string {
  if (!Number.isInteger(pathSegments) || pathSegments < 0 || pathSegments > MAX_PATH_SEGMENTS) {
    throw new InvalidArgumentError(
      `path_segments: must be in 0..${MAX_PATH_SEGMENTS}, got ${pathSegments}`,
    );
  }
  const bytes = Buffer.byteLength(url, "utf8");
  if (bytes > MAX_URL_BYTES) throw bad(`${bytes} bytes, over the limit of ${MAX_URL_BYTES}`);
  if (/[\x00-\x20\x7f]/.test(url)) throw bad("control character or space");
  const sep = url.indexOf("://");
  if (sep < 0) throw bad('not an absolute URL (no "://")');
  const schemeText = url.slice(0, sep);
  if (!/^[A-Za-z][A-Za-z0-9+.-]*$/.test(schemeText)) throw bad("bad scheme");
  const scheme = asciiLower(schemeText);
  let rest = url.slice(sep + 3);
  rest = rest.split("#")[0]!.split("?")[0]!; // fragment, then query: dropped
  const slash = rest.indexOf("/");
  let authority = slash < 0 ? rest : rest.slice(0, slash);
  const path = slash < 0 ? "" : rest.slice(slash);
  const at = authority.lastIndexOf("@"); // userinfo: dropped
  if (at >= 0) authority = authority.slice(at + 1);
  const [host, portText] = splitHostPort(authority);
  let key = `${scheme}://${host}`;
  if (portText !== "") {
    const port = parsePort(portText);
    if (port === undefined || port < 1 || port > 65535) {
      throw bad("port must be a number in 1..65535");
    }
    const defaultPort = (scheme === "https" && port === 443) || (scheme === "http" && port === 80);
    if (!defaultPort) key += `:${port}`;
  }
  const segments = path.split("/").filter((s) => s !== "");
  for (const seg of segments.slice(0, pathSegments)) key += `/${seg}`;
  return key;
}
