-- 0005: every photo goes through the import queue (one engine for the window's drops, the CLI's
-- `extract` and bulk imports).
--
-- `origin` says who asked for the item: `interactive` (a photo dropped or added in the window, or
-- given to `extract`) is claimed ahead of `import` (a bulk import), and the window's Extract view
-- shows the interactive items still waiting for review, so they survive a restart.
-- `updated_at` is indexed so that a process can follow the changes another process makes to the
-- shared queue (a CLI `extract` waiting for the window to work its items, or the other way round).

ALTER TABLE import_items ADD COLUMN origin TEXT NOT NULL DEFAULT 'import'
    CHECK (origin IN ('import', 'interactive'));

-- Claiming: interactive first, then fewest attempts, then oldest.
DROP INDEX import_items_by_state;
CREATE INDEX import_items_by_state ON import_items (state, origin, attempts, id);
CREATE INDEX import_items_by_update ON import_items (updated_at);
