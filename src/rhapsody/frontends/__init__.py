"""The three front ends on the one loop (app, plain, headless) and what they share: the renderer, the
previews, the prompt's aids. They get the agent and settings passed in and never import each other."""
