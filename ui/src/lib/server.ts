// A team catalog's server that cannot be reached: what the window says (the banner, the catalog
// view) while it is away. The backend sends `catalog://server` when it goes away and when it is
// back.
import type { CatalogServer } from "../bindings/CatalogServer";
import { elapsedText } from "./breaker";

function clock(ms: number, locale?: string, timeZone?: string): string {
  return new Intl.DateTimeFormat(locale, { hour: "2-digit", minute: "2-digit", timeZone }).format(new Date(ms));
}

/** The banner's words while the server is away (since when, for how long at `now`, why); null while it answers. */
export function serverAwayText(
  server: CatalogServer | null,
  now: number,
  locale?: string,
  timeZone?: string,
): string | null {
  if (server === null || server.away_since_ms === null) return null;
  const why = server.reason ? `: ${server.reason}` : "";
  const since = clock(server.away_since_ms, locale, timeZone);
  return `The team catalog's server cannot be reached since ${since}, ${elapsedText(server.away_since_ms, now)}${why}. Imports wait and go on by themselves once it is back; what is shown is what was read before.`;
}
