"""The rendered post-mortem: the incident as data, notebook evidence, the glossary, the prose, the post-mortem page and the renderer. Not: the measurements themselves (experiments)."""
