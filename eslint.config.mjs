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
    // Workflow code runs in Temporal's deterministic sandbox: no Node built-ins, no I/O. It sees the rest of the product
    // only through src/contract (activity inputs, results and interfaces), in every file under src/workflows/.
    // Which folder may import which is held by test/layers.test.ts.
    files: ['src/workflows/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: '^(node:|fs$|path$|os$|http$|https$|net$|crypto$|child_process$|worker_threads$)',
              message: 'workflow code must stay deterministic: no Node built-ins',
            },
            {
              regex: '^(openai|@anthropic-ai/|@aws-sdk/|@modelcontextprotocol/|@temporalio/(worker|client|activity))',
              message: 'workflow code must not import I/O',
            },
          ],
        },
      ],
    },
  },
  {
    // The contract is the lowest layer: workflows and activities both stand on it, so it imports nothing of theirs.
    files: ['src/contract/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { regex: '^\\.\\./', message: 'src/contract is the lowest layer: it imports nothing above it' },
            {
              regex: '^(node:|openai|@anthropic-ai/|@aws-sdk/|@temporalio/(worker|client|activity|workflow))',
              message: 'src/contract holds types and pure functions, no I/O',
            },
          ],
        },
      ],
    },
  },
);
