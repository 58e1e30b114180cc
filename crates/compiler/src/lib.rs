//! Context compiler: candidates, filters, dedup, RRF, rerank, reader-token packing, abstention.
