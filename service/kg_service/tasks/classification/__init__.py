"""Classification over scikit-learn's bundled data: data, models, stacked training, pyfunc."""
