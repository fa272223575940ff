// Lint: type-aware rules that matter for actor and queue code (no floating or misused promises),
// the machines/ purity rule, and no console in library code.
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', '.troupe/**', 'coverage/**'] },
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      parserOptions: { projectService: { allowDefaultProject: ['test/helpers/*.mjs'] }, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  {
    files: ['machines/**/*.ts'],
    rules: {
      'no-restricted-imports': ['error', { patterns: [{ regex: '^(?!xstate$|\\.\\.?/).*', message: 'machines/ imports only xstate and relative files.' }] }],
    },
  },
  {
    files: ['src/**/*.ts', 'machines/**/*.ts'],
    ignores: ['src/cli/**'],
    rules: { 'no-console': 'error' },
  },
  { files: ['eslint.config.js'], ...tseslint.configs.disableTypeChecked },
  // The dashboard's page: plain browser JavaScript, shipped as is (no build step, no types).
  { files: ['src/dashboard/public/**/*.js'], ...tseslint.configs.disableTypeChecked },
);
