-- The search index keeps a write's terms in memory until its commit, up to 8 MiB (FTS5's
-- `hashsize`, 1 MiB by default): a bulk write of 1,000 files of 1 KiB held more than 1 MiB of
-- terms, so FTS5 wrote them out as two segments, and the writer merged twice as many (an
-- import of 100,000 files made 200; docs/benchmarks.md, "One segment a bulk write"). The
-- memory is the writer connection's, only while a transaction holds that many terms.
INSERT INTO context_fts (context_fts, rank) VALUES ('hashsize', 8388608);
