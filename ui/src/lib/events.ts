// The one way the window listens to what Rust sends: the names and the payload types come from
// Rust (bindings/events.ts, generated from src-tauri/src/events.rs), so no component types an
// event's name or guesses its payload.
import { listen, type UnlistenFn } from "@tauri-apps/api/event";
import { EVENTS, type EventPayloads } from "../bindings/events";

export { EVENTS, type EventPayloads };

/** Calls `handler` with each payload of `event` until the returned function is called. */
export function listenTo<K extends keyof EventPayloads>(
  event: K,
  handler: (payload: EventPayloads[K]) => void,
): Promise<UnlistenFn> {
  return listen<EventPayloads[K]>(event, (e) => handler(e.payload));
}
