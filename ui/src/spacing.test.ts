/// <reference types="vite/client" />
// Svelte drops the whitespace at the start and end of a block's content ({#if}, {:else},
// {#each}, {#key}), so `tokens{#if budget} of a {budget}{/if}` renders "tokensof a". This reads
// every component and finds a block whose first or last words would be glued to the text beside
// it; the fix is to keep the space outside the block, or inside an expression (`{" · "}`).
import { parse } from "svelte/compiler";
import { describe, expect, it } from "vitest";

const components = import.meta.glob("./**/*.svelte", { query: "?raw", import: "default", eager: true }) as Record<
  string,
  string
>;

interface Node {
  type: string;
  start: number;
  data?: string;
  [key: string]: unknown;
}

/** Text or a value: what renders inline, where a lost space shows. */
function inline(node: Node | undefined): boolean {
  return node !== undefined && (node.type === "ExpressionTag" || (node.type === "Text" && /\S/.test(node.data ?? "")));
}

function branches(block: Node): Node[][] {
  const fragments = [block.consequent, block.alternate, block.body, block.fallback, block.fragment] as ({ nodes: Node[] } | null | undefined)[];
  return fragments.flatMap((f) => {
    if (!f) return [];
    // `{:else if}` is a block of its own inside the alternate: its branches are checked there.
    if (f.nodes.length === 1 && f.nodes[0].type === "IfBlock" && f.nodes[0].elseif) return [];
    return [f.nodes];
  });
}

/** The spaces Svelte would drop next to inline content, as "file:line". */
function gluedSpaces(file: string, source: string): string[] {
  const found: string[] = [];
  const line = (offset: number) => `${file}:${source.slice(0, offset).split("\n").length}`;
  const visit = (value: unknown): void => {
    if (Array.isArray(value)) {
      value.forEach((node: Node, i: number, nodes: Node[]) => {
        if (["IfBlock", "EachBlock", "KeyBlock"].includes(node?.type)) {
          const before = nodes[i - 1];
          const after = nodes[i + 1];
          const textBefore = inline(before) && !/\s$/.test(before.type === "Text" ? (before.data ?? "") : "x");
          const textAfter = inline(after) && !/^\s/.test(after.type === "Text" ? (after.data ?? "") : "x");
          for (const content of branches(node)) {
            const [first, second] = [content[0], content[1]];
            const [last, beforeLast] = [content[content.length - 1], content[content.length - 2]];
            const leads = first?.type === "Text" && /^\s/.test(first.data ?? "") && (inline(first) || inline(second));
            const trails = last?.type === "Text" && /\s$/.test(last.data ?? "") && (inline(last) || inline(beforeLast));
            if (textBefore && leads) found.push(line(first.start));
            if (textAfter && trails) found.push(line(last.start));
          }
        }
        visit(node);
      });
    } else if (value && typeof value === "object") {
      for (const [key, child] of Object.entries(value)) {
        if (key !== "expression" && key !== "test" && key !== "context") visit(child);
      }
    }
  };
  visit(parse(source, { modern: true }).fragment);
  return found;
}

describe("spaces in the UI's text", () => {
  it("finds a space Svelte would drop", () => {
    expect(gluedSpaces("a.svelte", "<p>{n} tokens{#if b}\n  of a {b} budget{/if}.</p>")).toEqual(["a.svelte:1"]);
    expect(gluedSpaces("b.svelte", "<p>{latency}{#if cost} · {cost}{/if}</p>")).toEqual(["b.svelte:1"]);
    expect(gluedSpaces("c.svelte", "<p>{#if a}x{:else}\n  {a}, {/if}b</p>")).toEqual(["c.svelte:2"]);
    // The space kept outside the block, or in an expression, or next to an element: nothing lost.
    expect(gluedSpaces("d.svelte", "<p>{n} tokens {#if b}of a {b} budget{/if}.</p>")).toEqual([]);
    expect(gluedSpaces("e.svelte", '<p>{latency}{#if cost}{" · "}{cost}{/if}</p>')).toEqual([]);
    expect(gluedSpaces("f.svelte", "<div>{#if a}\n  <span>x</span>\n{/if}</div>")).toEqual([]);
  });

  it("drops no space between words in any component", () => {
    expect(Object.keys(components).length).toBeGreaterThan(10);
    const found = Object.entries(components).flatMap(([file, source]) => gluedSpaces(file, source));
    expect(found).toEqual([]);
  });
});
