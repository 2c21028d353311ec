// The rules a compiler does not hold: a promise nobody awaits or hands on (its failure lost,
// its order unknown), an await of what is no promise, a throw of what is no Error, a switch
// over a union that forgets a member, an assertion the types already make, and code nobody
// uses; and a route of the API mounted on express other than from its declaration
// (src/api/http/declared-routes.ts), whose path, role check, body limit and place in the
// route list would then be written twice. Formatting is prettier's (make test checks it).
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["dist/", "node_modules/", "ironic-hook/", "docs/", ".state/"] },
  {
    files: ["src/**/*.ts", "test/**/*.ts"],
    extends: [tseslint.configs.base],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      "@typescript-eslint/no-floating-promises": "error",
      "@typescript-eslint/no-misused-promises": ["error", { checksVoidReturn: false }],
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "@typescript-eslint/await-thenable": "error",
      "@typescript-eslint/only-throw-error": "error",
      "@typescript-eslint/switch-exhaustiveness-check": [
        "error",
        { considerDefaultExhaustiveForUnions: true },
      ],
      "@typescript-eslint/no-unnecessary-type-assertion": "error",
      "@typescript-eslint/no-for-in-array": "error",
      "@typescript-eslint/restrict-plus-operands": "error",
      "@typescript-eslint/no-duplicate-type-constituents": "error",
      "@typescript-eslint/no-redundant-type-constituents": "error",
      "no-unreachable": "error",
    },
  },
  {
    files: ["src/**/*.ts"],
    ignores: ["src/api/http/declared-routes.ts"],
    rules: {
      "no-restricted-imports": [
        "error",
        {
          paths: [
            {
              name: "express",
              importNames: ["Router"],
              message:
                "Serve a route from its operation's declaration: DeclaredRoutes (src/api/http/declared-routes.ts).",
            },
          ],
        },
      ],
    },
  },
);
