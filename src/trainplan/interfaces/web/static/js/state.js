// The page's one state object, shared by the view modules.

export const state = {
  meta: null, // GET /api/fields
  fields: {}, // its fields by name
  values: {}, // each field's value as the form holds it (text)
  controls: {}, // each drawn field's control: { node, focus, get, set }
  config: null, // a pasted or uploaded config.json
  models: [], gpus: [], regions: [], // the catalogs
  result: null, // the estimate on screen
  error: null, // the refusal on screen, shown again once the form is built
  seq: 0, controller: null, timer: 0, // the live estimate's request in flight
  chart: null, planChart: null,
  plan: null, // the planner's answer on screen
  // the fields someone set (a control, the link, a config, a plan): under a recipe, one of them
  // at its default is still sent, since the recipe would fill it otherwise
  stated: new Set(),
};
