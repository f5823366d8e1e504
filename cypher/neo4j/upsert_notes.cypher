// upsert_notes: insert or update notes by path; MERGE on the unique path keeps it idempotent.
// params: rows  (list of {path, props: {title, source_type, content_hash, model, dims,
//                 embedded_at, text_version, embedding}})
// returns: (nothing)
UNWIND $rows AS r
MERGE (n:Note {path: r.path})
SET n += r.props
