// The commands, as generated from Rust's registry (bindings/commands.ts), with every rejection
// mapped to an ErrorReport (see errors.ts). No command name or argument key is written here.
import { invoke, type InvokeArgs } from "@tauri-apps/api/core";
import { commands } from "../bindings/commands";
import { toErrorReport } from "./errors";

async function call<T>(command: string, args?: InvokeArgs): Promise<T> {
  try {
    return await invoke<T>(command, args);
  } catch (error) {
    throw toErrorReport(error);
  }
}

export const api = commands(call);
