// create_passage_index: the vector index on Passage.embedding, configured as the note
// index is (create_vector_index): metric "cos", the dimension inlined by the loader.
// params: (none)
// inline: dims
// returns: (nothing)
CREATE VECTOR INDEX passage_embedding ON :Passage(embedding)
WITH CONFIG {"dimension": {{dims}}, "capacity": 10000, "metric": "cos"}
