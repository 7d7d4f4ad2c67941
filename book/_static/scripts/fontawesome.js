/*
 * grokkit: intentionally (nearly) empty. This file replaces pydata-sphinx-theme's
 * _static/scripts/fontawesome.js, the whole Font Awesome library (1.5 MB, every icon), which the
 * theme's templates load on every page: files in html_static_path (book/_static) overwrite the
 * theme's static files of the same name. The few icons the book shows are drawn by
 * book/_static/theme.css; any other Font Awesome icon still shows, through the theme's web fonts.
 */
