// The commands, as generated from Rust's registry (bindings/commands.ts), with every rejection
// mapped to an ErrorReport (see errors.ts). No command name or argument key is written here.
import { Channel, invoke, type InvokeArgs } from "@tauri-apps/api/core";
import { commands } from "../bindings/commands";
import type { JobEvent } from "../bindings/JobEvent";
import { toErrorReport } from "./errors";

async function call<T>(command: string, args?: InvokeArgs): Promise<T> {
  try {
    return await invoke<T>(command, args);
  } catch (error) {
    throw toErrorReport(error);
  }
}

function channel(onEvent: (event: JobEvent) => void): Channel<JobEvent> {
  const ch = new Channel<JobEvent>();
  ch.onmessage = onEvent;
  return ch;
}

const generated = commands(call);

export const api = {
  ...generated,
  /** Progress streams to `onEvent`. */
  extractPhotos: (paths: string[], onEvent: (event: JobEvent) => void) => generated.extractPhotos(paths, channel(onEvent)),
  reextract: (jobId: number, file: string, onEvent: (event: JobEvent) => void) =>
    generated.reextract(jobId, file, channel(onEvent)),
};
