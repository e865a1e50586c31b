"""Translation data sets (WMT, IWSLT, the offline En-Vi gettext corpus)."""
