"""The precision search: reduced-precision candidates, their mixes, records, and the int8 classes they hold on."""
