"""`laya-artifacts tune`: time an artifact under each Lambda memory size's CPU share and price a decision."""
