import { runNatively } from './native-anthropic';

// Imported before a suite (`import './support/run-natively'; import './agent.test';`), so that its workers are made
// after it: they read FANOUT_MODEL when they start.
runNatively();
