import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

/**
 * The run's name, to find a batch or run in the UI or with `fanout list --name`. A Keyword search attribute; the
 * dev servers this project starts register it, and on a cluster it is used once registered:
 * `temporal operator search-attribute create --name FanoutName --type Keyword`.
 */
export const FANOUT_NAME = defineSearchAttributeKey('FanoutName', SearchAttributeType.KEYWORD);
