"""The inference core: tokenize -> questions -> sequence -> session -> decode -> abstention -> decider."""
