// ESLint (flat config) for the web page's own modules and their unit tests; the vendored
// libraries are left alone. `make jstest` runs it.
import js from "@eslint/js";
import globals from "globals";

export default [
  { ignores: ["src/trainplan/interfaces/web/static/vendor/", "build/", "dist/", ".venv/", "tests/corpus/"] },
  js.configs.recommended,
  {
    files: ["src/trainplan/interfaces/web/static/**/*.js"],
    languageOptions: {
      ecmaVersion: 2022,
      sourceType: "module",
      // browser globals; the vendored Chart.js, a classic script, is read as window.Chart
      globals: { ...globals.browser },
    },
  },
  {
    files: ["tests/js/**/*.mjs", "eslint.config.js"],
    languageOptions: { ecmaVersion: 2022, sourceType: "module", globals: { ...globals.node } },
  },
  {
    rules: {
      "no-unused-vars": "error",
      "no-undef": "error",
      eqeqeq: ["error", "always"],
      "no-var": "error",
      "prefer-const": "error",
    },
  },
];
