"""The core's renderers (the hosts' files, the health check's settings) and what every renderer
shares: templates (templating) and writing a tree of files (files). gpucluster.rendering composes them
with the layers' renderers."""
