import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', '.dist-*/**', 'node_modules/**', 'coverage/**', '*.js', '*.mjs', 'scripts/**', '.exp/**'] },
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    languageOptions: { parserOptions: { project: './tsconfig.json', tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/no-require-imports': 'off',
    },
  },
  {
    // Plain CommonJS helpers the tests start as their own processes (an MCP server, tools a worker loads).
    files: ['**/*.js'],
    languageOptions: {
      sourceType: 'commonjs',
      globals: { require: 'readonly', module: 'writable', process: 'readonly', console: 'readonly' },
    },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
  {
    // Workflow code runs in Temporal's deterministic sandbox: no Node built-ins, no I/O, no activity code.
    files: ['src/workflows/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: [
                'node:*',
                'fs',
                'path',
                'os',
                'http',
                'https',
                'net',
                'crypto',
                'child_process',
                'worker_threads',
              ],
              message: 'workflow code must stay deterministic: no Node built-ins',
            },
            {
              group: [
                'openai',
                '@temporalio/worker',
                '@temporalio/client',
                '@temporalio/activity',
                '../sim/*',
                '../client/*',
                '../local/*',
                '../config/*',
              ],
              message: 'workflow code must not import I/O',
            },
            {
              group: ['../activities', '../activities/*'],
              message: 'import activities as types only (import type)',
              allowTypeImports: true,
            },
          ],
        },
      ],
    },
  },
);
