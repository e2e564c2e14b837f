// test/agent-crash.test.ts again, its agents on a Claude model through Anthropic's Messages API natively (issue 32).
import './support/run-natively';
import './agent-crash.test';
