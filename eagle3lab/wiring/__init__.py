"""What feeds the draft: layer-id conventions per engine, boundaries, hidden-state capture, chat templates, the slot-by-slot check and the SGLang embedding-capture patch."""
